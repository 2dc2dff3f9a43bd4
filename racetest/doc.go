// Package racetest is under construction; see the README.
package racetest
