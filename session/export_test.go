package session

// ProcessCPU exposes processCPU to the external benchmarks.
var ProcessCPU = processCPU
