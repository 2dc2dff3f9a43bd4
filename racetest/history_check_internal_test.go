package racetest

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

func TestCheckOptionsRefused(t *testing.T) {
	cfg := &rest.Config{}
	for name, o := range map[string]CheckOptions{
		"no config":         {Subject: Subject{Name: "s"}},
		"no name":           {Config: cfg},
		"ambiguous":         {Config: cfg, Subject: Subject{Name: "s"}, Ambiguous: 2},
		"negative ops":      {Config: cfg, Subject: Subject{Name: "s"}, Ops: -1},
		"negative parallel": {Config: cfg, Subject: Subject{Name: "s"}, Parallel: -1},
	} {
		if _, err := o.withDefaults(); !errors.Is(err, ErrInvalidCheckOptions) {
			t.Errorf("%s: %v, want ErrInvalidCheckOptions", name, err)
		}
	}
	o, err := CheckOptions{Config: cfg, Subject: Subject{Name: "s"}}.withDefaults()
	if err != nil || o.Histories != 1 || o.Ops != 40 || o.Objects != 3 || o.Subject.Namespaces != 1 || o.Parallel != 1 {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
}

func TestGenerateIsReplayable(t *testing.T) {
	o, _ := CheckOptions{Config: &rest.Config{}, Subject: Subject{Name: "s"}, Ambiguous: 0.1}.withDefaults()
	a, b := generate(7, o), generate(7, o)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave two histories")
	}
	if reflect.DeepEqual(a, generate(8, o)) {
		t.Fatal("two seeds gave one history")
	}
	o.Only = []int{3, 9}
	if got := generate(7, o); len(got) != 2 || got[0] != a[3] || got[1] != a[9] {
		t.Fatalf("Only kept %v", got)
	}
}

// states builds a truth of one object's states.
func states(uid string, ss ...serverState) *truth {
	for i := range ss {
		ss[i].UID, ss[i].Name = uid, "o"
	}
	return &truth{states: map[string][]serverState{uid: ss}, names: map[string]bool{}}
}

func rec(i int, w Writer, k OpKind, f Form, got *Version) Record {
	now := time.Now()
	r := Record{Op: Op{Index: i, Writer: w, Kind: k, Name: "o", Form: f}, Start: now.Add(time.Duration(i) * time.Millisecond), Deadline: now.Add(time.Hour)}
	r.End = r.Start.Add(time.Microsecond)
	if got != nil {
		r.Got, r.Found = *got, true
	}
	return r
}

func v(uid string, rv uint64) *Version { return &Version{Name: "o", UID: uid, RV: rv} }

func rules(vs []Violation) []Rule {
	var out []Rule
	for _, v := range vs {
		out = append(out, v.Rule)
	}
	return out
}

func TestCheckRules(t *testing.T) {
	o, _ := CheckOptions{Config: &rest.Config{}, Subject: Subject{Name: "s"}}.withDefaults()
	ns := []string{"ns"}
	tr := states("u1", serverState{Version: Version{RV: 10}}, serverState{Version: Version{RV: 11}})
	tr.states["u2"] = []serverState{{Version: Version{Name: "o", UID: "u2", RV: 20}}}
	tr.states["u3"] = []serverState{{Version: Version{Name: "o", UID: "u3", RV: 30}}, {Version: Version{Name: "o", UID: "u3", RV: 31}, Gone: true}}
	tr.states["u1"] = append(tr.states["u1"], serverState{Version: Version{Name: "o", UID: "u1", RV: 11, Deleting: true}})
	notFound := rec(3, WriterSubject, OpKindGet, FormTyped, nil)
	notFound.NotFound, notFound.Err = true, errors.New("not found")
	late := rec(1, WriterSubject, OpKindGet, FormTyped, v("u1", 11))
	late.End = late.Deadline.Add(time.Second)
	updateGone := rec(2, WriterSubject, OpKindUpdate, FormTyped, nil)
	updateGone.NotFound, updateGone.Err = true, errors.New("not found")
	deleteByName := rec(2, WriterSubject, OpKindDelete, FormTyped, nil) // Sent carries no UID
	deleting := v("u1", 11)
	deleting.Deleting = true
	for name, c := range map[string]struct {
		records []Record
		shown   map[Form]map[string]time.Time
		want    []Rule
	}{
		"own write then older read": {
			records: []Record{rec(0, WriterSubject, OpKindUpdate, FormTyped, v("u1", 11)), rec(1, WriterSubject, OpKindGet, FormMetadata, v("u1", 10))},
			want:    []Rule{RuleReadYourWrites},
		},
		"own write then same read": {
			records: []Record{rec(0, WriterSubject, OpKindUpdate, FormTyped, v("u1", 11)), rec(1, WriterSubject, OpKindGet, FormMetadata, v("u1", 11))},
		},
		"never had": {
			records: []Record{rec(1, WriterSubject, OpKindGet, FormTyped, v("u1", 12))},
			want:    []Rule{RuleNeverHad},
		},
		"the version of its deletion": {
			records: []Record{rec(1, WriterSubject, OpKindGet, FormTyped, v("u3", 31))},
			want:    []Rule{RuleNeverHad},
		},
		"newer then older across forms": {
			records: []Record{rec(1, WriterSubject, OpKindGet, FormTyped, v("u1", 11)), rec(2, WriterSubject, OpKindGet, FormUnstructured, v("u1", 10))},
			want:    []Rule{RuleMonotonic},
		},
		"found then NotFound, never deleted": {
			records: []Record{rec(1, WriterSubject, OpKindGet, FormTyped, v("u1", 11)), notFound},
			want:    []Rule{RuleMonotonic},
		},
		"read after the cache showed the deletion": {
			records: []Record{rec(5, WriterSubject, OpKindGet, FormTyped, v("u1", 11))},
			shown:   map[Form]map[string]time.Time{FormTyped: {"u1": time.Now().Add(-time.Second)}},
			want:    []Rule{RuleDeletionEnds},
		},
		"past the deadline": {
			records: []Record{late},
			want:    []Rule{RuleBounded},
		},
		"write answered NotFound, then the incarnation read": {
			records: []Record{rec(1, WriterSubject, OpKindGet, FormTyped, v("u1", 11)), updateGone, rec(3, WriterSubject, OpKindGet, FormMetadata, v("u1", 11))},
			want:    []Rule{RuleReadYourWrites},
		},
		"write answered NotFound, then a new incarnation read": {
			records: []Record{rec(1, WriterSubject, OpKindGet, FormTyped, v("u1", 11)), updateGone, rec(3, WriterSubject, OpKindGet, FormTyped, v("u2", 20))},
		},
		"delete by name, then the incarnation read": {
			records: []Record{rec(1, WriterSubject, OpKindGet, FormTyped, v("u1", 11)), deleteByName, rec(3, WriterSubject, OpKindGet, FormTyped, v("u1", 11))},
			want:    []Rule{RuleReadYourWrites},
		},
		"delete by name, then the incarnation read terminating": {
			records: []Record{rec(1, WriterSubject, OpKindGet, FormTyped, v("u1", 11)), deleteByName, rec(3, WriterSubject, OpKindGet, FormTyped, deleting)},
		},
		"the other writer's reads are not checked": {
			records: []Record{rec(1, WriterOther, OpKindGet, FormTyped, v("u1", 12))},
		},
	} {
		got := rules(check(o, ns, c.records, tr, c.shown))
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}

func TestCheckListMissingOwnWrite(t *testing.T) {
	o, _ := CheckOptions{Config: &rest.Config{}, Subject: Subject{Name: "s"}}.withDefaults()
	tr := states("u1", serverState{Version: Version{RV: 10, Labels: map[string]string{tierLabel: "a"}}})
	w := rec(0, WriterSubject, OpKindCreate, FormTyped, &Version{Name: "o", UID: "u1", RV: 10, Labels: map[string]string{tierLabel: "a"}})
	list := rec(1, WriterSubject, OpKindList, FormTyped, nil)
	list.Op.Selector = tierLabel + "=a"
	got := rules(check(o, []string{"ns"}, []Record{w, list}, tr, nil))
	if !reflect.DeepEqual(got, []Rule{RuleReadYourWrites}) {
		t.Fatalf("%v, want read-your-writes", got)
	}
	// Moved out of the selector by the server later: not missing.
	tr.states["u1"] = append(tr.states["u1"], serverState{Version: Version{Name: "o", UID: "u1", RV: 11}})
	if got := check(o, []string{"ns"}, []Record{w, list}, tr, nil); len(got) != 0 {
		t.Fatalf("relabelled object counted missing: %v", got)
	}
}
