// Package v1alpha1 is the WorkItem API of the racesafe example: the custom
// resource whose deletion got stuck in the incident.
//
// +kubebuilder:object:generate=true
// +groupName=demo.racesafe.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of WorkItem.
	GroupVersion = schema.GroupVersion{Group: "demo.racesafe.io", Version: "v1alpha1"}

	// SchemeBuilder registers WorkItem and WorkItemList.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
