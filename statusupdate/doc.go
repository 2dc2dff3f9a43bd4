// Package statusupdate is under construction; see the README.
package statusupdate
