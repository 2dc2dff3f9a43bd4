// Package config holds the WorkItem CRD manifest that `make generate` writes,
// embedded so the demo installs it from any working directory.
package config

import (
	_ "embed"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed crd/demo.racesafe.io_workitems.yaml
var workItemCRD []byte

// WorkItemCRD returns the generated CustomResourceDefinition of WorkItem.
func WorkItemCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(workItemCRD, crd); err != nil {
		return nil, fmt.Errorf("decode embedded WorkItem CRD: %w", err)
	}
	return crd, nil
}
