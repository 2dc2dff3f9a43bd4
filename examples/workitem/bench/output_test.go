package main

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/racesafe/racesafe/examples/workitem/scenario"
)

func TestOutputsCarryTheStalls(t *testing.T) {
	rep := scenario.Report{Controller: scenario.NaiveClient, Items: 10, Deleted: 10, Elapsed: time.Second,
		Reads: 40, Waited: 3, WaitP50: 12 * time.Millisecond, WaitMax: 31 * time.Millisecond,
		WaitedInStalls: 2, Stalls: 5, StallMax: 27 * time.Millisecond}
	c := scenario.Capacity{Status: 100, Release: 100}

	var b bytes.Buffer
	if err := writeCSV(&b, []roundRun{{round: 0, rep: rep}}, c); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || len(rows[0]) != len(rows[1]) {
		t.Fatalf("csv: %d rows, head %d fields; want a head and one row of as many fields", len(rows), len(rows[0]))
	}
	for col, want := range map[string]string{"waited_reads": "3", "waited_reads_in_stalls": "2", "stalls": "5", "stall_max_ms": "27"} {
		i := slices.Index(rows[0], col)
		if i < 0 {
			t.Errorf("csv has no column %s", col)
			continue
		}
		if rows[1][i] != want {
			t.Errorf("csv %s = %q, want %q", col, rows[1][i], want)
		}
	}

	b.Reset()
	writeMarkdown(&b, []scenario.Report{rep}, c)
	lines := strings.Split(b.String(), "\n")
	head := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "waited reads") })
	if head < 0 || head+2 >= len(lines) {
		t.Fatalf("no table with waited reads in:\n%s", b.String())
	}
	cells := func(l string) []string {
		f := strings.Split(strings.Trim(strings.TrimSpace(l), "|"), "|")
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		return f
	}
	heads, row := cells(lines[head]), cells(lines[head+2]) // after the head and its alignment row
	if len(row) != len(heads) {
		t.Fatalf("row %q has other columns than head %q", lines[head+2], lines[head])
	}
	for col, want := range map[string]string{
		"waited reads (p50, max), in stalls": "3 of 40 (12ms, 31ms), 2",
		"process stalls (longest)":           "5 (27ms)",
	} {
		i := slices.Index(heads, col)
		if i < 0 {
			t.Errorf("markdown has no column %q", col)
			continue
		}
		if row[i] != want {
			t.Errorf("markdown %q = %q, want %q", col, row[i], want)
		}
	}
}
