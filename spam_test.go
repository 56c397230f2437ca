package app

import (
	"fmt"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/wal"
)

func TestWarnPerNewProps(t *testing.T) {
	b, _ := openBolt(t, false)
	defer b.Close()
	core, logs := observer.New(zapcore.WarnLevel)
	l := zap.New(core)
	cat := &S1{b, new(Cnt)}
	for i := 0; i < 1000; i++ {
		if _, err := actors.NewProps(fmt.Sprintf("p-%d", i), wal.Kafka, cat, actors.WithLogger(l)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("1000 NewProps on one *S1: %d Warn lines; first: %q %v", logs.Len(), logs.All()[0].Message, logs.All()[0].ContextMap())
}
