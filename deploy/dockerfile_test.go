package deploy

import (
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dockerInstruction is one instruction of a Dockerfile, continuation lines joined.
type dockerInstruction struct {
	cmd, args string
}

func readDockerfile(t *testing.T) []dockerInstruction {
	t.Helper()
	raw, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []dockerInstruction
	joined := strings.ReplaceAll(string(raw), "\\\n", " ")
	for line := range strings.SplitSeq(joined, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cmd, args, _ := strings.Cut(line, " ")
		out = append(out, dockerInstruction{strings.ToUpper(cmd), strings.Join(strings.Fields(args), " ")})
	}
	return out
}

// TestDockerfile checks the image the issue asks for, as hadolint is not to be had here: a multi-stage
// build of a static binary (CGO_ENABLED=0), a final stage from scratch holding that binary alone, run
// as a non-root user, the data directory a volume, a HEALTHCHECK through weir's own health probe at the
// HTTP port the image listens on, SIGTERM to stop (the node drains on it), and serve as the command.
func TestDockerfile(t *testing.T) {
	ins := readDockerfile(t)
	var stages [][]dockerInstruction
	for _, in := range ins {
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("%s before the first FROM", in.cmd)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a build stage and a final one", len(stages))
	}
	build := stages[0]
	if !slices.ContainsFunc(build, func(in dockerInstruction) bool {
		return in.cmd == "RUN" && strings.Contains(in.args, "CGO_ENABLED=0") && strings.Contains(in.args, "go build")
	}) {
		t.Error("the build stage does not go build with CGO_ENABLED=0")
	}
	final := map[string][]string{}
	for _, in := range stages[len(stages)-1] {
		final[in.cmd] = append(final[in.cmd], in.args)
	}
	if got := final["FROM"]; len(got) != 1 || got[0] != "scratch" {
		t.Errorf("final stage FROM %q, want scratch (the binary alone)", got)
	}
	if got := final["COPY"]; len(got) == 0 || !strings.HasSuffix(got[0], "/out/weir /weir") {
		t.Errorf("final stage copies %q, want the binary first", got)
	}
	users := final["USER"]
	if len(users) != 1 || users[0] == "root" || strings.HasPrefix(users[0], "0") {
		t.Errorf("final stage USER %q, want one non-root user", users)
	}
	env := map[string]string{}
	for _, e := range final["ENV"] {
		for kv := range strings.FieldsSeq(e) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	if got := final["VOLUME"]; len(got) != 1 || !strings.Contains(got[0], `"`+env["WEIR_DATA_DIR"]+`"`) || env["WEIR_DATA_DIR"] == "" {
		t.Errorf("VOLUME %q, want the WEIR_DATA_DIR %q", got, env["WEIR_DATA_DIR"])
	}
	_, httpPort, _ := net.SplitHostPort(env["WEIR_HTTP_ADDR"])
	probe := regexp.MustCompile(`CMD \["/weir", "health", "--http", "127\.0\.0\.1:` + httpPort + `"`)
	if got := final["HEALTHCHECK"]; len(got) != 1 || httpPort == "" || !probe.MatchString(got[0]) {
		t.Errorf("HEALTHCHECK %q, want weir health against the HTTP port %q of WEIR_HTTP_ADDR", got, httpPort)
	}
	if got := final["STOPSIGNAL"]; len(got) != 1 || got[0] != "SIGTERM" {
		t.Errorf("STOPSIGNAL %q, want SIGTERM", got)
	}
	if got, want := final["ENTRYPOINT"], `["/weir"]`; len(got) != 1 || got[0] != want {
		t.Errorf("ENTRYPOINT %q, want %s", got, want)
	}
	if got, want := final["CMD"], `["serve"]`; len(got) != 1 || got[0] != want {
		t.Errorf("CMD %q, want %s", got, want)
	}
}

// TestComposeMatchesImage checks that the compose file's nodes listen for HTTP where the image's
// health check asks and keep their data in the image's volume.
func TestComposeMatchesImage(t *testing.T) {
	env := map[string]string{}
	for _, in := range readDockerfile(t) {
		if in.cmd == "ENV" {
			for kv := range strings.FieldsSeq(in.args) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
		}
	}
	for name, s := range readCompose(t).Services {
		if got := s.Environment["WEIR_HTTP_ADDR"]; got != env["WEIR_HTTP_ADDR"] {
			t.Errorf("%s: WEIR_HTTP_ADDR %q, want the image's %q, where its HEALTHCHECK asks", name, got, env["WEIR_HTTP_ADDR"])
		}
		if got := s.Environment["WEIR_DATA_DIR"]; got != env["WEIR_DATA_DIR"] {
			t.Errorf("%s: WEIR_DATA_DIR %q, want the image's volume %q", name, got, env["WEIR_DATA_DIR"])
		}
	}
}
