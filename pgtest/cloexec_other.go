//go:build !unix

package pgtest

func closeInheritedOnExec() {}
