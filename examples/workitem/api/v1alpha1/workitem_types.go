package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Phase is where a WorkItem is in its life.
// +kubebuilder:validation:Enum=Pending;Installing;Ready;Failed;Deleting;Deleted
type Phase string

// The phases of a WorkItem. An empty phase is read as Pending.
const (
	PhasePending    Phase = "Pending"
	PhaseInstalling Phase = "Installing"
	PhaseReady      Phase = "Ready"
	PhaseFailed     Phase = "Failed"
	PhaseDeleting   Phase = "Deleting"
	PhaseDeleted    Phase = "Deleted"
)

// Finalizer holds a WorkItem until its payload is uninstalled.
const Finalizer = "demo.racesafe.io/uninstall"

// ChildLabel labels each child object an install creates with the UID of
// its WorkItem, so that controllers List an item's children by it and the
// scenario counts them on the server.
const ChildLabel = "demo.racesafe.io/workitem-uid"

// ConditionDryRun says whether the item's install and uninstall only pretend.
// Syncing it was the second status write of the incident's delete flow.
const ConditionDryRun = "DryRun"

// WorkItemSpec is what to install.
type WorkItemSpec struct {
	// Payload names what the item installs.
	// +kubebuilder:validation:MinLength=1
	Payload string `json:"payload"`

	// DryRun makes install and uninstall only pretend.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
}

// WorkItemStatus is what the controller observed and did.
type WorkItemStatus struct {
	// Phase is where the item is in its life.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// Conditions include DryRun.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// WorkItem is a payload installed by the controller and uninstalled, behind a
// finalizer, when the item is deleted.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Payload",type=string,JSONPath=`.spec.payload`
// +kubebuilder:printcolumn:name="DryRun",type=string,JSONPath=`.status.conditions[?(@.type=="DryRun")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WorkItem struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WorkItemSpec   `json:"spec,omitempty"`
	Status WorkItemStatus `json:"status,omitempty"`
}

// WorkItemList is a list of WorkItems.
//
// +kubebuilder:object:root=true
type WorkItemList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WorkItem `json:"items"`
}

func init() {
	SchemeBuilder.Register(&WorkItem{}, &WorkItemList{})
}
