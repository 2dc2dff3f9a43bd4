package racetest

import (
	"fmt"
	"strings"
	"time"
)

// Writer names who sends an operation of a history.
type Writer string

// The writers of a history.
const (
	// WriterSubject is the client under test.
	WriterSubject Writer = "subject"
	// WriterOther is another writer: a client straight to the API server.
	WriterOther Writer = "other"
)

// OpKind is what an operation of a history does.
type OpKind string

// The operations [CheckHistories] generates. Reads are the subject's only.
const (
	OpKindGet          OpKind = "get"
	OpKindList         OpKind = "list"
	OpKindCreate       OpKind = "create"
	OpKindGenerateName OpKind = "create-generate-name"
	OpKindUpdate       OpKind = "update"
	OpKindMergePatch   OpKind = "merge-patch"
	OpKindApply        OpKind = "apply"
	OpKindStatusUpdate OpKind = "status-update"
	OpKindStatusPatch  OpKind = "status-patch"
	OpKindDelete       OpKind = "delete"
	OpKindDeleteAllOf  OpKind = "delete-all-of"
	OpKindUnfinalize   OpKind = "remove-finalizers"
	OpKindPause        OpKind = "pause"
)

// Form is the Go form a read or write uses: each form is an informer of
// its own in a controller-runtime cache.
type Form string

// The forms.
const (
	FormTyped        Form = "typed"
	FormUnstructured Form = "unstructured"
	FormMetadata     Form = "metadata"
)

// Op is one operation of a generated history: data, so that a history can
// be printed, shrunk and run again.
type Op struct {
	// Index is the operation's place in the generated history; a shrunk
	// history keeps the indexes of the operations it kept.
	Index  int
	Writer Writer
	Kind   OpKind
	// Namespace is the index of the history's namespace the operation is in.
	Namespace int
	// Name is the object's name (for OpKindGenerateName, its prefix).
	Name string
	// Form is the form of a read, or of the object a subject write sends.
	Form Form
	// Selector is a List's or DeleteAllOf's label selector, "" for all.
	Selector string
	// Tier is the value of the tier label a write sets; "" removes it.
	Tier string
	// Finalizer makes a create or update keep the checker's finalizer on the
	// object (a create adds it, an update keeps or adds it).
	Finalizer bool
	// Precondition is "uid" or "rv" for a delete with that precondition,
	// "rv" for an update or patch sent with an optimistic lock.
	Precondition string
	// Propagation is a delete's propagation policy, "" for the default.
	Propagation string
	// Ambiguous makes a subject write applied but answered with an error
	// (a timeout), as [FaultAppliedTimeout] does.
	Ambiguous bool
	// Pause is how long an OpKindPause waits.
	Pause time.Duration
}

// String prints op in one line, the form a reproducer lists.
func (op Op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s %s", op.Index, op.Writer, op.Kind)
	if op.Kind == OpKindPause {
		fmt.Fprintf(&b, " %s", op.Pause)
		return b.String()
	}
	if op.Kind != OpKindList && op.Kind != OpKindDeleteAllOf {
		fmt.Fprintf(&b, " ns%d/%s", op.Namespace, op.Name)
	} else {
		fmt.Fprintf(&b, " ns%d", op.Namespace)
	}
	if op.Form != "" {
		fmt.Fprintf(&b, " form=%s", op.Form)
	}
	if op.Selector != "" {
		fmt.Fprintf(&b, " selector=%s", op.Selector)
	}
	if op.isWrite() && op.Kind != OpKindDelete && op.Kind != OpKindDeleteAllOf && op.Kind != OpKindUnfinalize {
		tier := op.Tier
		if tier == "" {
			tier = "none"
		}
		fmt.Fprintf(&b, " tier=%s", tier)
	}
	if op.Finalizer {
		b.WriteString(" finalizer")
	}
	if op.Precondition != "" {
		fmt.Fprintf(&b, " precondition=%s", op.Precondition)
	}
	if op.Propagation != "" {
		fmt.Fprintf(&b, " propagation=%s", op.Propagation)
	}
	if op.Ambiguous {
		b.WriteString(" ambiguous")
	}
	return b.String()
}

func (op Op) isRead() bool { return op.Kind == OpKindGet || op.Kind == OpKindList }

func (op Op) isWrite() bool { return !op.isRead() && op.Kind != OpKindPause }

// Version is one object's identity and version as an operation saw it.
type Version struct {
	Name string
	UID  string
	// RV is the resourceVersion, parsed as the integer etcd makes it.
	RV     uint64
	Labels map[string]string
	// Deleting is set when the object carried a deletion timestamp.
	Deleting bool
}

// Record is what one operation of a history did, as the checker saw it.
type Record struct {
	Op    Op
	Start time.Time
	End   time.Time
	// Deadline is the deadline of the operation's context.
	Deadline time.Time
	// Sent is the version a write sent (RV 0 without one).
	Sent Version
	// Got is what a Get or a write returned; Found is false for NotFound
	// or an error.
	Got   Version
	Found bool
	// Items are what a List returned.
	Items []Version
	// Err is the operation's error, nil on success.
	Err error
	// NotFound is set when Err is a NotFound.
	NotFound bool
	// Refused is set when the subject refused the read (Subject.Refused).
	Refused bool
}

// String prints r in one line: the operation and what it returned.
func (r Record) String() string {
	var b strings.Builder
	b.WriteString(r.Op.String())
	switch {
	case r.Refused:
		fmt.Fprintf(&b, " -> refused: %v", r.Err)
	case r.NotFound:
		b.WriteString(" -> NotFound")
	case r.Err != nil:
		fmt.Fprintf(&b, " -> error: %v", r.Err)
	case r.Op.Kind == OpKindList:
		b.WriteString(" -> [")
		for i, it := range r.Items {
			if i > 0 {
				b.WriteString(" ")
			}
			b.WriteString(it.String())
		}
		b.WriteString("]")
	case r.Found:
		fmt.Fprintf(&b, " -> %s", r.Got)
	}
	fmt.Fprintf(&b, " (%s)", r.End.Sub(r.Start).Round(time.Microsecond))
	return b.String()
}

// String prints v as name@rv/uid-prefix with its tier and deletion mark.
func (v Version) String() string {
	uid := v.UID
	if len(uid) > 8 {
		uid = uid[:8]
	}
	s := fmt.Sprintf("%s@%d/%s", v.Name, v.RV, uid)
	if t := v.Labels[tierLabel]; t != "" {
		s += " tier=" + t
	}
	if v.Deleting {
		s += " deleting"
	}
	return s
}
