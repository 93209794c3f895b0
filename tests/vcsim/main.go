// A vCenter API simulator for benchlib's tests: govmomi's own (simulator.VPX), on a loopback port.
//
// One datacenter, one cluster of two hosts, three VMs (each with one disk on a PVSCSI controller);
// the tests reconfigure them through the API. With -tls it serves HTTPS with a certificate for
// 127.0.0.1 made at start (ECDSA P-256, self-signed) and prints it (PEM) after the URL, for a test
// to trust it as a lab would trust its own CA. Storage I/O Control is on for every datastore, with a
// 30 ms congestion threshold (manual; 90% of peak throughput kept for the automatic mode), as a real vCenter
// reports it (govmomi's simulator leaves it unset), and ConfigureDatastoreIORM_Task changes it as vCenter does,
// refusing a threshold out of its range (govmomi's simulator does not implement it). Prints
// the SDK URL on its first line and serves until it is interrupted or its standard input closes.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// iorm is the simulator's StorageResourceManager with the one method it lacks.
type iorm struct {
	*simulator.StorageResourceManager
}

// ConfigureDatastoreIORMTask sets a datastore's Storage I/O Control as the spec says, in a task on the datastore.
func (m *iorm) ConfigureDatastoreIORMTask(req *types.ConfigureDatastoreIORM_Task) soap.HasFault {
	body := &methods.ConfigureDatastoreIORM_TaskBody{}
	datastore, ok := simulator.Map.Get(req.Datastore).(*simulator.Datastore)
	if !ok {
		body.Fault_ = simulator.Fault("", &types.ManagedObjectNotFound{Obj: req.Datastore})
		return body
	}
	task := simulator.CreateTask(datastore, "configureDatastoreIORM", func(*simulator.Task) (types.AnyType, types.BaseMethodFault) {
		config := datastore.IormConfiguration
		if config == nil {
			config = &types.StorageIORMInfo{CongestionThresholdMode: "manual", CongestionThreshold: 30, PercentOfPeakThroughput: 90}
			datastore.IormConfiguration = config
		}
		if req.Spec.Enabled != nil {
			config.Enabled = *req.Spec.Enabled
		}
		// vCenter takes 5 to 100 ms, and 50% to 100% of peak throughput (the API reference's ranges)
		if req.Spec.CongestionThreshold != 0 && (req.Spec.CongestionThreshold < 5 || req.Spec.CongestionThreshold > 100) {
			return nil, &types.InvalidArgument{InvalidProperty: "congestionThreshold"}
		}
		if req.Spec.PercentOfPeakThroughput != 0 && (req.Spec.PercentOfPeakThroughput < 50 || req.Spec.PercentOfPeakThroughput > 100) {
			return nil, &types.InvalidArgument{InvalidProperty: "percentOfPeakThroughput"}
		}
		if req.Spec.CongestionThresholdMode != "" {
			config.CongestionThresholdMode = req.Spec.CongestionThresholdMode
		}
		if req.Spec.CongestionThreshold != 0 {
			config.CongestionThreshold = req.Spec.CongestionThreshold
		}
		if req.Spec.PercentOfPeakThroughput != 0 {
			config.PercentOfPeakThroughput = req.Spec.PercentOfPeakThroughput
		}
		return nil, nil
	})
	body.Res = &types.ConfigureDatastoreIORM_TaskResponse{Returnval: task.Run()}
	return body
}

func main() {
	withTLS := flag.Bool("tls", false, "serve HTTPS with a self-signed certificate")
	datacenters := flag.Int("datacenters", 1, "datacenters, each with its own LocalDS_0 (names unique only within one)")
	flag.Parse()
	model := simulator.VPX()
	model.Datacenter = *datacenters
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
		entity.(*simulator.Datastore).IormConfiguration = &types.StorageIORMInfo{
			Enabled: true, CongestionThresholdMode: "manual", CongestionThreshold: 30, PercentOfPeakThroughput: 90,
		}
	}
	manager := simulator.Map.Get(*model.ServiceContent.StorageResourceManager).(*simulator.StorageResourceManager)
	simulator.Map.Put(&iorm{manager})
	if *withTLS {
		cert, err := loopbackCertificate()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		model.Service.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	}
	server := model.Service.NewServer()
	defer server.Close()
	fmt.Println(server.URL.String())
	if *withTLS {
		pem.Encode(os.Stdout, &pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})
	}
	io.Copy(io.Discard, os.Stdin) // the test closes our standard input to stop us
}

// loopbackCertificate makes a self-signed certificate for 127.0.0.1 and ::1, valid for a day.
func loopbackCertificate() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	template := x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, &template, &template, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
