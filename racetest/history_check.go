package racetest

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// Rule names a guarantee [CheckHistories] checks over each history.
type Rule string

// The rules.
const (
	// RuleNeverHad: a read returns a (UID, resourceVersion) the server never
	// had: one it never stored, or the version of the object's deletion
	// (the answer to the write that removed its last finalizer, say).
	RuleNeverHad Rule = "never-had"
	// RuleReadYourWrites: after a subject write answered at a version, a
	// later subject read of that object, in any form, returns that version
	// or newer (a newer incarnation, NotFound once the server deleted it), or
	// is refused. After the subject's own delete of an incarnation (the one
	// it sent, or else the newest it had read or written), a read shows
	// that incarnation only with its deletion timestamp; after a subject
	// write answered NotFound, it shows that incarnation no more. A List
	// misses no object the subject's newest write shows matching its
	// selector, unless the server later moved it out or deleted it.
	RuleReadYourWrites Rule = "read-your-writes"
	// RuleMonotonic: per object and across forms, a read never returns a
	// version older than one an earlier subject read returned; NotFound
	// after a returned version counts as newer only if the server deleted
	// that incarnation.
	RuleMonotonic Rule = "monotonic"
	// RuleDeletionEnds: once the subject's cache (the form's informer,
	// watched by the checker) delivered an incarnation's deletion, no later
	// read in that form returns that incarnation.
	RuleDeletionEnds Rule = "deletion-ends"
	// RuleBounded: no operation returns later than its context's deadline
	// plus CheckOptions.Slack.
	RuleBounded Rule = "bounded"
)

// Rules are every rule, in the order reports list them.
var Rules = []Rule{RuleNeverHad, RuleReadYourWrites, RuleMonotonic, RuleDeletionEnds, RuleBounded}

// Violation is one breach of a rule in a history.
type Violation struct {
	Rule Rule
	// Op is the index, in the generated history, of the operation that
	// broke the rule.
	Op int
	// Message says what it returned and what the rule expected.
	Message string
}

// String prints v in one line.
func (v Violation) String() string { return fmt.Sprintf("%s at #%d: %s", v.Rule, v.Op, v.Message) }

// ownWrite is the subject's newest acknowledged write of an object.
type ownWrite struct {
	Version
	deleted bool // the write was a delete of incarnation UID
	gone    bool // the write was answered NotFound: UID no longer existed
	op      int
}

// seenRead is the newest version a subject read returned of an object.
type seenRead struct {
	Version
	op int
}

// checker walks one history in order and collects its violations.
type checker struct {
	o      CheckOptions
	ns     []string
	tr     *truth
	shown  map[Form]map[string]time.Time
	writes map[string]ownWrite
	seen   map[string]seenRead
	out    []Violation
}

// check returns the violations of records, the subject's and the other
// writer's operations in the order they ran, against the server's states tr
// and the deletions the subject's cache showed.
func check(o CheckOptions, namespaces []string, records []Record, tr *truth, shown map[Form]map[string]time.Time) []Violation {
	c := &checker{o: o, ns: namespaces, tr: tr, shown: shown, writes: map[string]ownWrite{}, seen: map[string]seenRead{}}
	for _, r := range records {
		if !r.Deadline.IsZero() && r.End.After(r.Deadline.Add(o.Slack)) {
			c.flag(RuleBounded, r, "returned %s after its deadline", r.End.Sub(r.Deadline).Round(time.Millisecond))
		}
		if r.Op.Writer != WriterSubject {
			continue
		}
		switch {
		case r.Op.isRead() && r.Err == nil:
			c.read(r)
		case r.Op.Kind == OpKindGet && r.NotFound:
			c.absent(r, c.key(r.Op.Namespace, r.Op.Name))
		case r.Op.isWrite() && r.Err == nil:
			c.write(r)
		case r.Op.isWrite() && r.NotFound:
			c.answeredGone(r)
		}
	}
	return c.out
}

func (c *checker) key(ns int, name string) string { return c.ns[ns] + "/" + name }

func (c *checker) flag(rule Rule, r Record, format string, args ...any) {
	c.out = append(c.out, Violation{Rule: rule, Op: r.Op.Index, Message: fmt.Sprintf(format, args...) + "; the read: " + r.String()})
}

func (c *checker) write(r Record) {
	switch r.Op.Kind {
	case OpKindDelete:
		key := c.key(r.Op.Namespace, r.Op.Name)
		sent := r.Sent
		if sent.UID == "" {
			// A delete by name deleted whatever was there: the newest
			// incarnation the subject knew is gone or going either way.
			var ok bool
			if sent, ok = c.known(key); !ok {
				delete(c.writes, key)
				return
			}
		}
		c.writes[key] = ownWrite{Version: sent, deleted: true, op: r.Op.Index}
	case OpKindDeleteAllOf:
		prefix := c.ns[r.Op.Namespace] + "/"
		for key := range c.writes {
			if strings.HasPrefix(key, prefix) {
				delete(c.writes, key)
			}
		}
	default:
		if r.Found && r.Got.Name != "" {
			c.writes[c.key(r.Op.Namespace, r.Got.Name)] = ownWrite{Version: r.Got, op: r.Op.Index}
		}
	}
}

// known returns the newest version of key the subject wrote or read.
func (c *checker) known(key string) (Version, bool) {
	w, wrote := c.writes[key]
	s, read := c.seen[key]
	switch {
	case wrote && read && c.newer(s.Version, w.Version), !wrote && read:
		return s.Version, true
	case wrote:
		return w.Version, true
	}
	return Version{}, false
}

// answeredGone keeps what a subject write answered NotFound told: the
// newest incarnation of the object the subject knew no longer exists.
func (c *checker) answeredGone(r Record) {
	if r.Op.Kind == OpKindDeleteAllOf || r.Op.Kind == OpKindCreate || r.Op.Kind == OpKindGenerateName {
		return
	}
	key := c.key(r.Op.Namespace, r.Op.Name)
	if v, ok := c.known(key); ok && v.UID != "" {
		c.writes[key] = ownWrite{Version: v, deleted: true, gone: true, op: r.Op.Index}
	}
}

func (c *checker) read(r Record) {
	if r.Op.Kind == OpKindGet {
		key := c.key(r.Op.Namespace, r.Op.Name)
		c.observe(r, key, r.Got)
		c.remember(key, r.Got, r.Op.Index)
		return
	}
	listed := map[string]bool{}
	for _, it := range r.Items {
		key := c.key(r.Op.Namespace, it.Name)
		listed[key] = true
		c.observe(r, key, it)
	}
	c.missing(r, listed)
	for _, it := range r.Items {
		c.remember(c.key(r.Op.Namespace, it.Name), it, r.Op.Index)
	}
}

func (c *checker) remember(key string, v Version, op int) {
	s, ok := c.seen[key]
	if !ok || c.newer(v, s.Version) {
		c.seen[key] = seenRead{Version: v, op: op}
	}
}

// newer reports whether a is a later version than b: the same incarnation
// at a higher resourceVersion, or a later incarnation.
func (c *checker) newer(a, b Version) bool {
	if a.UID == b.UID {
		return a.RV > b.RV
	}
	return c.tr.created(a.UID) > c.tr.created(b.UID)
}

// observe checks one object a read returned.
func (c *checker) observe(r Record, key string, v Version) {
	if !c.tr.had(v.UID, v.RV) {
		c.flag(RuleNeverHad, r, "%s returned, the server never had it", v)
	}
	if w, ok := c.writes[key]; ok {
		switch {
		case w.gone && v.UID == w.UID:
			c.flag(RuleReadYourWrites, r, "%s returned after the subject's write (#%d) was answered NotFound", v, w.op)
		case w.deleted && v.UID == w.UID && !v.Deleting:
			c.flag(RuleReadYourWrites, r, "%s returned after the subject's own delete of it (#%d) was answered", v, w.op)
		case !w.deleted && c.newer(w.Version, v):
			c.flag(RuleReadYourWrites, r, "%s returned, older than the subject's own write %s (#%d)", v, w.Version, w.op)
		}
	}
	if s, ok := c.seen[key]; ok && c.newer(s.Version, v) {
		c.flag(RuleMonotonic, r, "%s returned after #%d returned %s", v, s.op, s.Version)
	}
	form := r.Op.Form
	if t, ok := c.shown[form][v.UID]; ok && t.Before(r.Start) {
		c.flag(RuleDeletionEnds, r, "%s returned %s after the %s cache delivered its deletion", v, r.Start.Sub(t).Round(time.Millisecond), form)
	}
}

// absent checks a NotFound of key.
func (c *checker) absent(r Record, key string) {
	if w, ok := c.writes[key]; ok && !w.deleted && !c.tr.deletedAfter(w.UID, w.RV, false) {
		c.flag(RuleReadYourWrites, r, "NotFound after the subject's own write %s (#%d), which the server never deleted", w.Version, w.op)
	}
	if s, ok := c.seen[key]; ok && !c.tr.deletedAfter(s.UID, s.RV, false) {
		c.flag(RuleMonotonic, r, "NotFound after #%d returned %s, which the server never deleted", s.op, s.Version)
	}
}

// missing checks that a List listed every object of its namespace whose
// subject's newest write matches its selector.
func (c *checker) missing(r Record, listed map[string]bool) {
	sel := labels.Everything()
	if r.Op.Selector != "" {
		var err error
		if sel, err = labels.Parse(r.Op.Selector); err != nil {
			return
		}
	}
	prefix := c.ns[r.Op.Namespace] + "/"
	for key, w := range c.writes {
		if !strings.HasPrefix(key, prefix) || listed[key] || w.deleted || !sel.Matches(labels.Set(w.Labels)) {
			continue
		}
		moved := c.tr.changedAfter(w.UID, w.RV, func(s serverState) bool { return sel.Matches(labels.Set(s.Labels)) })
		if !moved {
			c.flag(RuleReadYourWrites, r, "%s missing, the subject's own write (#%d) matches the selector", w.Version, w.op)
		}
	}
}
