package esdbfake

// BeforeCaughtUp sets the function a subscription runs between sending what
// it found and its checkpoint before caught-up, until the test ends.
func BeforeCaughtUp(t interface{ Cleanup(func()) }, f func()) {
	beforeCaughtUp.Store(&f)
	t.Cleanup(func() { beforeCaughtUp.Store(nil) })
}
