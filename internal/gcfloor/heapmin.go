//go:build !goexperiment.heapminimum512kib

package gcfloor

// heapMinimum is the runtime's smallest heap goal at GOGC=100
// (runtime.defaultHeapMinimum).
const heapMinimum = 4 << 20
