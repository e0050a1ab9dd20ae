package seal

// testKey is a session key for tests.
var testKey = []byte("0123456789abcdef0123456789abcdef")
