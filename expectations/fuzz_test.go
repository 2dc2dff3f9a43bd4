package expectations_test

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/racesafe/racesafe/expectations"
)

// FuzzCheck proves that no input panics and that the verdict of Check is the
// order of resourceversion.CompareResourceVersion, for writes and deletions,
// for the same and another incarnation.
func FuzzCheck(f *testing.F) {
	seeds := []struct {
		want, seen        string
		otherUID, removal bool
	}{
		{"5", "5", false, false},
		{"5", "4", false, false},
		{"10", "9", false, false},
		{"9", "10", false, false},
		{"5", "7", true, false},
		{"7", "5", true, false},
		{"5", "5", false, true},
		{"5", "9", true, true},
		{"5", "3", true, true},
		{"", "5", false, false},
		{"5", "", false, false},
		{"05", "5", false, false},
		{"5", "0", false, false},
		{"5", "5a", false, false},
		{"18446744073709551616", "18446744073709551615", false, false},
		{"-1", "٣", true, true},
	}
	for _, s := range seeds {
		f.Add(s.want, s.seen, s.otherUID, s.removal)
	}
	f.Fuzz(func(t *testing.T, want, seen string, otherUID, removal bool) {
		tr := expectations.New(expectations.Options{Name: "fuzz"})
		expect := tr.ExpectWrite
		if removal {
			expect = tr.ExpectDeletion
		}
		err := expect(configMap("a", "u1", want))
		if _, cmpErr := resourceversion.CompareResourceVersion(want, want); cmpErr != nil {
			if !errors.Is(err, expectations.ErrInvalidResourceVersion) || tr.Pending() != 0 {
				t.Fatalf("expect rv %q = %v with Pending %d, want ErrInvalidResourceVersion and nothing recorded", want, err, tr.Pending())
			}
			return
		}
		if err != nil {
			t.Fatalf("expect rv %q = %v", want, err)
		}

		seenUID := "u1"
		if otherUID {
			seenUID = "u2"
		}
		err = tr.Check(configMap("a", seenUID, seen))

		order, cmpErr := resourceversion.CompareResourceVersion(seen, want)
		if cmpErr != nil {
			if !errors.Is(err, expectations.ErrInvalidResourceVersion) || errors.Is(err, expectations.ErrStale) {
				t.Fatalf("Check(rv %q) = %v, want only ErrInvalidResourceVersion", seen, err)
			}
			return
		}
		var fresh bool
		switch {
		case otherUID:
			fresh = order > 0
		case removal:
			fresh = false
		default:
			fresh = order >= 0
		}
		if fresh {
			if err != nil || tr.Pending() != 0 {
				t.Fatalf("want %q seen %q (other uid %v, deletion %v): Check = %v, Pending %d; want fresh and dropped",
					want, seen, otherUID, removal, err, tr.Pending())
			}
			return
		}
		var stale *expectations.StaleError
		if !errors.As(err, &stale) || stale.Want != want || stale.Seen != seen || stale.Deletion != removal || tr.Pending() != 1 {
			t.Fatalf("want %q seen %q (other uid %v, deletion %v): Check = %v, Pending %d; want stale and kept",
				want, seen, otherUID, removal, err, tr.Pending())
		}
	})
}
