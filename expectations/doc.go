// Package expectations is under construction; see the README.
package expectations
