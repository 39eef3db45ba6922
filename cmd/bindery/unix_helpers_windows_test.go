package main

import (
	"errors"
	"os"
	"os/exec"
)

func mkfifo(string, uint32) error { return errors.ErrUnsupported }

func inodeOf(os.FileInfo) uint64 { return 0 }

func setUser(*exec.Cmd, uint32) {}
