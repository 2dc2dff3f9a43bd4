// Package scenario runs the incident as an experiment: it creates WorkItems,
// lets a controller drive them to Failed (each install creating one child
// ConfigMap), deletes them all in one burst while the controller's informer
// lags behind the API server, and measures what happens: items stuck, and
// children duplicated or left behind, counted on the server. The demo, the benchmarks and the example's integration tests all
// run it, so the figures they print come from one piece of code.
package scenario
