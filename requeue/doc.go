// Package requeue is under construction; see the README.
package requeue
