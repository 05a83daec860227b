package script

// AfterLinger has f called whenever a script of r that outlived its call
// has finished and its realm is freed.
func AfterLinger(r *Runtime, f func()) { r.afterLinger = f }
