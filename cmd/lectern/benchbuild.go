//go:build lectern_bench

package main

// The bench's build: its switch may turn the session check off.
func init() { benchBuild = true }
