package flow

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestScanDisableForReadsTheModulesLists(t *testing.T) {
	root := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cmd/main.go", `package main
var o = client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{
	&corev1.Secret{},
	&apiv1.Backup{},
}}}
`)
	write("cmd/main_test.go", `package main
var o = client.CacheOptions{DisableFor: []client.Object{&corev1.Pod{}}}
`)
	write("vendor/x/x.go", `package x
var o = client.CacheOptions{DisableFor: []client.Object{&corev1.Node{}}}
`)
	got := scanDisableFor(root)
	slices.Sort(got)
	if want := []string{"Backup", "Secret"}; !slices.Equal(got, want) {
		t.Fatalf("scanDisableFor = %v, want %v (tests and vendor skipped)", got, want)
	}
	if scanDisableFor("") != nil {
		t.Fatal("an empty root was scanned")
	}
}
