// Command lowwater is the operator's tool for a lowwater checkpoint
// catalog: list, show and verify the stored checkpoints, raise, lower or
// delete one by hand, and move a whole catalog between bbolt and etcd.
//
//	lowwater --catalog bolt:/var/lib/node/lowwater.db list
//	lowwater --catalog etcd://10.0.0.1:2379/lowwater verify
//
// Run `lowwater --help` for the commands, their flags and exit codes. The
// tool is package cli; a program with WALs of its own builds its own.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/lowwater/lowwater/cli"
)

func main() {
	// SIGHUP too: an ssh session that drops would end a restore part way
	// with no word of what it wrote.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	code := cli.Main(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
