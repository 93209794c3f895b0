// A vCenter API simulator for benchlib's tests: govmomi's own (simulator.VPX), on a loopback port.
//
// One datacenter, one cluster of two hosts, three VMs (each with one disk on a PVSCSI controller);
// the tests reconfigure them through the API. Storage I/O Control is on for every datastore, with a
// 30 ms congestion threshold, as a real vCenter reports it (govmomi's simulator leaves it unset). Prints the SDK URL on its first line and serves
// until it is interrupted or its standard input closes.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

func main() {
	model := simulator.VPX()
	model.Datacenter = 1
	model.Cluster = 1
	model.Host = 0
	model.ClusterHost = 2
	model.Machine = 3
	if err := model.Create(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer model.Remove()
	for _, entity := range simulator.Map.All("Datastore") {
		entity.(*simulator.Datastore).IormConfiguration = &types.StorageIORMInfo{Enabled: true, CongestionThreshold: 30}
	}
	server := model.Service.NewServer()
	defer server.Close()
	fmt.Println(server.URL.String())
	io.Copy(io.Discard, os.Stdin) // the test closes our standard input to stop us
}
