//go:build !unix

package config

import "github.com/refill-dev/refill"

// access cannot read ownership outside Unix, and allows all: command
// jobs, and so run.job_user, run only on Unix.
func access(string, *refill.JobUser, uint32) string { return "" }
