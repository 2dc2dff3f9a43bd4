// Package phase is under construction; see the README.
package phase
