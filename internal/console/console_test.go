package console_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/server"
)

// testTimeout bounds each test; generous, because the machine is shared.
const testTimeout = 90 * time.Second

// startNode runs a node on free loopback ports, logging nowhere, closed when the test ends.
func startNode(t *testing.T) *server.Node {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.KafkaAddr = "127.0.0.1:0"
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.ControllerAddr = "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := server.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// TestConsoleServed: the node serves the console's files at / to GET, with a content security policy
// that keeps the page to its own origin, and answers 405 to other methods.
func TestConsoleServed(t *testing.T) {
	n := startNode(t)
	base := "http://" + n.HTTPAddr()
	for path, want := range map[string]string{"/": "text/html", "/console.js": "text/javascript", "/console.css": "text/css"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), want) ||
			!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("GET %s: %d %q %q", path, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Security-Policy"))
		}
	}
	resp, err := http.Post(base+"/", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d, want 405", resp.StatusCode)
	}
}

// TestConsoleInChromium drives the console in headless Chromium: it creates a topic with the page's
// form, produces to it with franz-go and sees the partition's high watermark change on the page,
// alters a config, sees a group's lag change, resets the group's offsets through the confirmation
// dialog, and reads the records in the browser. It writes screenshots of the main pages to a
// temporary directory ($WEIR_CONSOLE_SCREENSHOTS if set), which it logs, for a person to look at.
// Without chromium it skips, unless CI=true.
//
// chromedp drives Chromium through the DevTools protocol; it is a test-only dependency, because
// filling forms, clicking and waiting for the page's live updates need the protocol, which
// chromium --dump-dom and --screenshot do not give.
func TestConsoleInChromium(t *testing.T) {
	chrome, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed")
		}
		t.Skip("chromium is not installed (apt-get install chromium)")
	}
	shots := os.Getenv("WEIR_CONSOLE_SCREENSHOTS")
	if shots == "" {
		if shots, err = os.MkdirTemp("", "weir-console-"); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshots in %s", shots)

	n := startNode(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	base := "http://" + n.HTTPAddr() + "/"
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(browser, steps...); err != nil {
			body, _ := chromedp.Run(browser, chromedp.Text(chromedp.CSS("main")))
			t.Fatalf("%s: %v\nthe page shows:\n%s", what, err, body)
		}
	}
	// until waits for a JavaScript condition to hold on the page, which updates itself every two
	// seconds.
	until := func(what, cond string) {
		t.Helper()
		run(what, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(30*time.Second)))
	}
	text := func(sel string) string {
		return fmt.Sprintf(`(document.querySelector(%q)?.textContent ?? "")`, sel)
	}
	shot := func(name string) {
		t.Helper()
		run("settle", chromedp.Sleep(300*time.Millisecond))
		png, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	run("the cluster page", chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`#brokers table`)))
	until("the broker listed", `document.querySelector("#brokers").textContent.includes("controller")`)

	run("create a topic in the console",
		chromedp.Navigate(base+"#/topics"), chromedp.WaitVisible(chromedp.CSS(`#create`)),
		chromedp.SendKeys(chromedp.CSS(`#create input[name=name]`), "orders"),
		chromedp.SendKeys(chromedp.CSS(`#create input[name=partitions]`), "2"),
		chromedp.SendKeys(chromedp.CSS(`#create input[name=configs]`), "retention.ms=86400000"),
		chromedp.Click(chromedp.CSS(`#create button`)))
	until("the new topic's page", `location.hash === "#/topics/orders" && !!document.querySelector('[data-hw="1"]')`)
	until("an empty partition", text(`[data-hw="0"]`)+` === "0"`)

	// A group with a live member, so that the pages show one.
	live, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.ConsumerGroup("live"), kgo.ConsumeTopics("orders"),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	go func() {
		for ctx.Err() == nil {
			live.PollFetches(ctx)
		}
	}()

	pc, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	produce := func(count int) {
		t.Helper()
		for i := range count {
			value := fmt.Sprintf(`{"order":%d,"item":"book","amount":%d.5}`, i, 10+i)
			if err := pc.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Key: fmt.Appendf(nil, "customer-%d", i%3), Value: []byte(value),
				Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("test")}}}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(10)
	until("the high watermark after a produce", text(`[data-hw="0"]`)+` === "10"`)
	run("alter a config",
		chromedp.SendKeys(chromedp.CSS(`#alter input[name=key]`), "retention.ms"),
		chromedp.SendKeys(chromedp.CSS(`#alter input[name=value]`), "3600000"),
		chromedp.Click(chromedp.CSS(`#alter button`)))
	until("the altered config", `document.querySelector("#configs").textContent.includes("3600000")`)
	shot("topic")

	adm := kadm.NewClient(pc)
	commit := kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 4, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "billing", commit); err != nil {
		t.Fatal(err)
	}
	run("the group's page", chromedp.Navigate(base+"#/groups/billing"))
	until("the group's lag", text(`[data-lag="orders/0"]`)+` === "6"`)
	produce(5)
	until("the lag after a produce", text(`[data-lag="orders/0"]`)+` === "11"`)
	shot("group")

	run("reset the group's offsets to latest",
		chromedp.SetValue(chromedp.CSS(`#reset select[name=to]`), "latest"),
		chromedp.Click(chromedp.CSS(`#reset button`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-ok`)))
	shot("group-reset-confirm")
	run("confirm the reset", chromedp.Click(chromedp.CSS(`#confirm-ok`)))
	until("the lag after the reset", text(`[data-lag="orders/0"]`)+` === "0"`)

	run("the groups page", chromedp.Navigate(base+"#/groups"))
	until("the live group's member", `document.querySelector("#groups").textContent.includes("Stable")`)
	shot("groups")
	run("the live group's page", chromedp.Navigate(base+"#/groups/live"))
	until("its member and assignment", `document.querySelector("#members").textContent.includes("orders: 0, 1")`)
	shot("group-live")

	run("the records browser", chromedp.Navigate(base+"#/records/orders?partition=0&from=earliest&as=json"))
	until("the records", `document.querySelectorAll("#records tbody tr").length === 15`)
	until("a value shown as JSON", `document.querySelector("#records tbody tr td.data:nth-child(4)").textContent.includes('"amount": 10.5')`)
	shot("records")
	run("the records as hex", chromedp.Navigate(base+"#/records/orders?partition=0&from=offset&at=12&as=hex"))
	until("hex", `document.querySelectorAll("#records tbody tr").length === 3 && document.querySelector("#records td.data").textContent.startsWith("63 75")`)

	run("the topics page", chromedp.Navigate(base+"#/topics"))
	until("the topic's rates", `document.querySelector('[data-topic="orders"] path.in') !== null`)
	shot("topics")
	run("the cluster page", chromedp.Navigate(base))
	until("the topic on the cluster page", `!!document.querySelector('#topics [data-topic="orders"]')`)
	shot("cluster")
}
