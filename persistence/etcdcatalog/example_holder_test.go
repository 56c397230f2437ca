package etcdcatalog_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/persistence/etcdcatalog"
)

// Each node names itself in the owner keys it puts, so that whoever finds
// a pchannel owned, another node or an operator, can tell by whom. (An
// embedded etcd stands in for your cluster.)
func ExampleWithHolder() {
	endpoints, stopEtcd := standInEtcd() // your cluster's endpoints
	defer stopEtcd()
	node := func(name string) (*etcdcatalog.Catalog, *concurrency.Session) {
		cat, err := etcdcatalog.Open(clientv3.Config{
			Endpoints:   endpoints,
			DialTimeout: 5 * time.Second,
			Logger:      zap.NewNop(),
		}, etcdcatalog.WithHolder(name)) // the pod's name, say
		if err != nil {
			panic(err)
		}
		session, err := concurrency.NewSession(cat.Client(), concurrency.WithTTL(10))
		if err != nil {
			panic(err)
		}
		return cat, session
	}
	ctx := context.Background()
	a, sessionA := node("querynode-7")
	defer a.Close()
	defer sessionA.Close()
	owned, err := a.Own(ctx, "dml_0", sessionA)
	if err != nil {
		panic(err)
	}
	defer owned.Close()

	b, sessionB := node("querynode-8")
	defer b.Close()
	defer sessionB.Close()
	_, err = b.TryOwn(ctx, "dml_0", sessionB)
	if oe := (*etcdcatalog.OwnedError)(nil); errors.As(err, &oe) {
		fmt.Printf("querynode-8 cannot own dml_0: %s does\n", oe.Holder)
	}
	owner, err := b.OwnerOf(ctx, "dml_0")
	if err != nil {
		panic(err)
	}
	fmt.Printf("dml_0 is owned by %s, under the term it writes with: %v\n",
		owner.Holder, owner.Term == owned.Term())
	// Output:
	// querynode-8 cannot own dml_0: querynode-7 does
	// dml_0 is owned by querynode-7, under the term it writes with: true
}
