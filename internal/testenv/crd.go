package testenv

import (
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// OpenCRD returns a namespaced CRD for gvk whose schema accepts any fields,
// for tests that drive unstructured objects. status adds the status
// subresource; without it a status write answers NotFound.
func OpenCRD(gvk schema.GroupVersionKind, plural string, status bool) *apiextensionsv1.CustomResourceDefinition {
	keep := true
	version := apiextensionsv1.CustomResourceDefinitionVersion{
		Name: gvk.Version, Served: true, Storage: true,
		Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", XPreserveUnknownFields: &keep,
		}},
	}
	if status {
		version.Subresources = &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + gvk.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gvk.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Kind: gvk.Kind, ListKind: gvk.Kind + "List", Plural: plural, Singular: strings.ToLower(gvk.Kind),
			},
			Scope:    apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{version},
		},
	}
}
