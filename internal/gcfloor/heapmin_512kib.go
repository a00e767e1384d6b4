//go:build goexperiment.heapminimum512kib

package gcfloor

// heapMinimum is the runtime's smallest heap goal at GOGC=100
// (runtime.defaultHeapMinimum) when toolgate is built with
// GOEXPERIMENT=heapminimum512kib.
const heapMinimum = 512 << 10
