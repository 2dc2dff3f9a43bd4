package expectations

// SetDeliveredHook makes h run in c's event handlers between reading an
// entry and acting on it, for tests that replace the entry there.
func SetDeliveredHook(c *Client, h func()) { c.deliveredHook = h }
