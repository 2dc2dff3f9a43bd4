package testenv_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/internal/testenv"
)

// TestStartServesCreate proves the control plane is a real API server: the
// created object comes back with a UID and a resourceVersion that only a
// server assigns.
func TestStartServesCreate(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Data:       map[string]string{"k": "v"},
	}
	if err := c.Create(t.Context(), cm); err != nil {
		t.Fatalf("create: %v", err)
	}
	if cm.UID == "" || cm.ResourceVersion == "" {
		t.Fatalf("server did not assign UID/resourceVersion: %+v", cm.ObjectMeta)
	}
	var got corev1.ConfigMap
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(cm), &got); err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Data["k"] != "v" || got.UID != cm.UID {
		t.Fatalf("read back %+v, want the created object", got)
	}
}

// TestStartRestartableRestartsTheSameServer restarts the API server of a
// restartable control plane: a request fails while it is down, and the
// client built before the restart reads what was written before it, so the
// server came back with the same certificates on the same etcd.
func TestStartRestartableRestartsTheSameServer(t *testing.T) {
	env, restarter := testenv.StartRestartable(t, testenv.Options{})
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before", Namespace: "default"}}
	if err := c.Create(t.Context(), cm); err != nil {
		t.Fatalf("create: %v", err)
	}
	restart, err := restarter.Restart(t.Context())
	if err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if restart.DownErr == nil {
		t.Fatal("no request failed while the API server was down")
	}
	var got corev1.ConfigMap
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(cm), &got); err != nil {
		t.Fatalf("get through the config of before the restart: %v", err)
	}
	if got.UID != cm.UID {
		t.Fatalf("read back UID %s, want %s", got.UID, cm.UID)
	}
}
