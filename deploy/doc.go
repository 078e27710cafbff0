// Package deploy holds the tests of the deployment files: the Helm chart
// under helm/sluice and the gateway examples. It is a module of its own so
// that the Helm and Kubernetes libraries the tests need stay out of the
// root module's graph.
package deploy
