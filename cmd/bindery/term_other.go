//go:build !linux

package main

import "os"

// isTerminal: the progress bar is drawn on Linux only.
func isTerminal(*os.File) bool { return false }

func terminalWidth(*os.File) int { return 0 }
