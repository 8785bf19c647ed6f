package main

// version is Skiff's own version, overridden at build time with
// -ldflags "-X main.version=...".
var version = "0.1.0-dev"
