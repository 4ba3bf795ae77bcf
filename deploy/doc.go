// Package deploy holds no code: its directory is weir's deployment files (compose.yaml, k8s/, the
// Prometheus and Grafana files) and its tests check them. This file only names the package.
package deploy
