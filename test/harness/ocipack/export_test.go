package ocipack

// ModuleOf is moduleOf, for the tests.
var ModuleOf = moduleOf
