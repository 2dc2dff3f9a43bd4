// Package api holds the kinds of the checkers' test controllers.
package api

type ObjectMeta struct {
	Name, Namespace, GenerateName, ResourceVersion, UID string
	Finalizers                                          []string
}

// MetaAccessor is the stub of metav1.ObjectMetaAccessor.
type MetaAccessor interface{ GetObjectMeta() *ObjectMeta }

func (m *ObjectMeta) GetObjectMeta() *ObjectMeta { return m }
func (m *ObjectMeta) GetUID() string             { return m.UID }

func (m *ObjectMeta) GetName() string            { return m.Name }
func (m *ObjectMeta) GetNamespace() string       { return m.Namespace }
func (m *ObjectMeta) SetGenerateName(n string)   { m.GenerateName = n }
func (m *ObjectMeta) GetResourceVersion() string { return m.ResourceVersion }

type Phase string

const (
	PhasePending  Phase = "Pending"
	PhaseRunning  Phase = "Running"
	PhaseDeleting Phase = "Deleting"
	PhaseFailed   Phase = "Failed"
)

type WidgetStatus struct {
	Phase Phase
	State string
}

// Widget is the owner kind.
type Widget struct {
	ObjectMeta
	Status WidgetStatus
}

func (w *Widget) DeepCopy() *Widget { c := *w; return &c }

// Part is the child kind.
type Part struct {
	ObjectMeta
}

type PartList struct{ Items []Part }

func (*PartList) IsList() {}
