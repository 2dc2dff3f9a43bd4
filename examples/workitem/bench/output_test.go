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
	var line string
	for l := range strings.Lines(b.String()) {
		if strings.Contains(l, "waited reads") {
			line = l
		}
	}
	if got := strings.Count(line, "|"); got == 0 {
		t.Fatalf("no table with waited reads in:\n%s", b.String())
	}
	last := strings.TrimSpace(strings.Split(b.String(), line)[1])
	rowLine := strings.Split(last, "\n")[1]
	if strings.Count(rowLine, "|") != strings.Count(line, "|") {
		t.Errorf("row %q has other columns than head %q", rowLine, line)
	}
	for _, want := range []string{"3 of 40 (12ms, 31ms), 2", "| 5 (27ms) |"} {
		if !strings.Contains(rowLine, want) {
			t.Errorf("row %q lacks %q", rowLine, want)
		}
	}
}
