package main

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// composeTools are the programs each image of docker-compose.yml ships (read
// from the images' Dockerfiles): a health check can run only those. The
// image lectern builds (Dockerfile) is distroless: its health check is
// /lectern itself.
var composeTools = map[string][]string{
	"postgres:16":                    {"sh", "pg_isready"},
	"kurrentplatform/kurrentdb:25.0": {"sh", "curl"},
	"nats:2.10-alpine":               {"sh", "wget"},
	"build: .":                       {"/lectern"},
}

// composeFile is what the tests read of docker-compose.yml.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image       string `yaml:"image"`
	Build       string `yaml:"build"`
	Restart     string `yaml:"restart"`
	Command     any    `yaml:"command"` // a string or a list
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
}

// words is a command, as a list or as a string.
func words(command any) []string {
	switch c := command.(type) {
	case string:
		return strings.Fields(c)
	case []any:
		var out []string
		for _, w := range c {
			out = append(out, fmt.Sprint(w))
		}
		return out
	}
	return nil
}

var composePath = filepath.Join("..", "..", "docker-compose.yml")

// The production shape of docker-compose.yml: its health checks run
// programs their images have; KurrentDB, NATS JetStream, PostgreSQL and
// Lectern each restart; Lectern checks itself with lectern healthcheck and
// reads the models.yaml mounted into it; and docker-compose accepts the
// file (where it is installed).
func TestComposeHealthChecks(t *testing.T) {
	raw, err := os.ReadFile(composePath)
	if err != nil {
		t.Fatal(err)
	}
	var doc composeFile
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Services) == 0 {
		t.Fatal("no services read")
	}
	t.Run("health checks", func(t *testing.T) { checkHealthChecks(t, doc) })
	t.Run("services", func(t *testing.T) { checkServices(t, doc) })
	t.Run("docker-compose config", func(t *testing.T) {
		if _, err := exec.LookPath("docker-compose"); err != nil {
			t.Skip("docker-compose is not installed: docker-compose.yml is not validated by docker-compose config")
		}
		config := func(env ...string) (string, error) {
			cmd := exec.Command("docker-compose", "-f", composePath, "config", "-q")
			cmd.Env = append(os.Environ(), env...)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		if out, err := config("LECTERN_JWT_KEY=k", "LECTERN_DATA_KEY=k"); err != nil {
			t.Errorf("docker-compose config: %v\n%s", err, out)
		}
		// Without its keys Lectern is not started with empty ones.
		if out, err := config("LECTERN_JWT_KEY=", "LECTERN_DATA_KEY=k"); err == nil || !strings.Contains(out, "set LECTERN_JWT_KEY") {
			t.Errorf("docker-compose config without LECTERN_JWT_KEY: %v, want a refusal naming it\n%s", err, out)
		}
	})
}

// Every health check runs a program its image has, and every service
// another waits on to be healthy has one.
func checkHealthChecks(t *testing.T, doc composeFile) {
	for name, svc := range doc.Services {
		image := svc.Image
		if svc.Build != "" {
			image = "build: " + svc.Build
		}
		for dep, d := range svc.DependsOn {
			if d.Condition == "service_healthy" && doc.Services[dep].Healthcheck == nil {
				t.Errorf("%s waits for %s to be healthy, which has no health check", name, dep)
			}
		}
		if svc.Healthcheck == nil {
			continue
		}
		test := svc.Healthcheck.Test
		if len(test) < 2 {
			t.Errorf("%s: health check %q", name, test)
			continue
		}
		var program string
		switch test[0] {
		case "CMD":
			program = test[1]
		case "CMD-SHELL":
			program = "sh"
			if fields := strings.Fields(test[1]); len(fields) > 0 {
				// The shell runs the command's first word too.
				if tools, ok := composeTools[image]; ok && !slices.Contains(tools, fields[0]) {
					t.Errorf("%s: the health check runs %s, which %s does not have (it has %v)", name, fields[0], image, tools)
				}
			}
		default:
			t.Errorf("%s: health check %q: want CMD or CMD-SHELL", name, test)
			continue
		}
		tools, ok := composeTools[image]
		if !ok {
			t.Errorf("%s: image %s is not in composeTools: say what it ships", name, image)
			continue
		}
		if !slices.Contains(tools, program) {
			t.Errorf("%s: the health check runs %s, which %s does not have (it has %v)", name, program, image, tools)
		}
	}
}

// The services the issue asks for (issue 19): KurrentDB from its own image,
// NATS with JetStream, a restart policy on each, and Lectern wired to them,
// checking itself with lectern healthcheck and reading models.yaml.
func checkServices(t *testing.T, doc composeFile) {
	// Every service is long-running (none is a one-shot job): each restarts.
	for name, svc := range doc.Services {
		if svc.Restart == "" || svc.Restart == "no" {
			t.Errorf("%s: restart %q, want a restart policy (unless-stopped, always, on-failure)", name, svc.Restart)
		}
	}
	lectern, ok := doc.Services["lectern"]
	if !ok {
		t.Fatal("no lectern service")
	}
	hostOf := func(variable string) string {
		u, err := url.Parse(lectern.Environment[variable])
		if err != nil || u.Hostname() == "" {
			t.Errorf("lectern: %s=%q names no host", variable, lectern.Environment[variable])
			return ""
		}
		return u.Hostname()
	}

	// The event store is KurrentDB, from its publisher's image.
	if store := hostOf("EVENTSTORE_URL"); store != "" {
		if img := doc.Services[store].Image; !strings.HasPrefix(img, "kurrentplatform/kurrentdb:") {
			t.Errorf("lectern's event store %s runs image %q, want kurrentplatform/kurrentdb", store, img)
		}
	}
	// The broker is NATS with JetStream on.
	if broker := hostOf("LECTERN_BROKER_URL"); broker != "" {
		svc := doc.Services[broker]
		cmd := words(svc.Command)
		if !strings.HasPrefix(svc.Image, "nats:") || !slices.ContainsFunc(cmd, func(w string) bool { return w == "-js" || w == "--jetstream" }) {
			t.Errorf("lectern's broker %s: image %q, command %q: want nats with -js (--jetstream)", broker, svc.Image, cmd)
		}
	}

	// Lectern's health check is lectern healthcheck.
	var check []string
	if lectern.Healthcheck != nil && len(lectern.Healthcheck.Test) > 1 {
		check = lectern.Healthcheck.Test[1:]
		if lectern.Healthcheck.Test[0] == "CMD-SHELL" {
			check = strings.Fields(check[0])
		}
	}
	if len(check) < 2 || filepath.Base(check[0]) != "lectern" || check[1] != "healthcheck" {
		t.Errorf("lectern: health check %q, want lectern healthcheck", check)
	}

	// models.yaml is mounted where LECTERN_MODELS_FILE names it.
	want := lectern.Environment["LECTERN_MODELS_FILE"]
	mounted := slices.ContainsFunc(lectern.Volumes, func(v string) bool {
		parts := strings.Split(v, ":")
		return len(parts) >= 2 && parts[0] == "./models.yaml" && parts[1] == want
	})
	if want == "" || !mounted {
		t.Errorf("lectern: LECTERN_MODELS_FILE=%q, volumes %q: want ./models.yaml mounted at it", want, lectern.Volumes)
	}
	if _, err := os.Stat(filepath.Join("..", "..", "models.yaml")); err != nil {
		t.Errorf("the mounted models.yaml: %v", err)
	}
}
