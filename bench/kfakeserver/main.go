// Command kfakeserver runs franz-go's in-memory fake Kafka cluster (kfake, one broker, no disk) as a
// process of its own, so that the harness measures it as it measures weir: over loopback, in a process
// whose heap holds only the broker. It listens on 127.0.0.1:PORT and runs until SIGINT or SIGTERM.
//
//	go run ./kfakeserver -port 9092
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

var errNoPort = errors.New("kfakeserver: -port is required")

func main() {
	port := flag.Int("port", 0, "loopback port to listen on")
	flag.Parse()
	if err := run(*port); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(port int) error {
	if port <= 0 {
		return errNoPort
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port))
	if err != nil {
		return fmt.Errorf("kfakeserver: %w", err)
	}
	defer c.Close()
	fmt.Println(c.ListenAddrs()[0])
	<-ctx.Done()
	return nil
}
