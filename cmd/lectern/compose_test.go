package main

import (
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

// Every health check of docker-compose.yml runs a program its image has, and
// every service another waits on to be healthy has one.
func TestComposeHealthChecks(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Image       string `yaml:"image"`
			Build       string `yaml:"build"`
			Healthcheck *struct {
				Test []string `yaml:"test"`
			} `yaml:"healthcheck"`
			DependsOn map[string]struct {
				Condition string `yaml:"condition"`
			} `yaml:"depends_on"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Services) == 0 {
		t.Fatal("no services read")
	}
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

	// The file is one docker-compose accepts, where it is installed.
	if _, err := exec.LookPath("docker-compose"); err == nil {
		cmd := exec.Command("docker-compose", "-f", filepath.Join("..", "..", "docker-compose.yml"), "config", "-q")
		cmd.Env = append(os.Environ(), "LECTERN_JWT_KEY=k", "LECTERN_DATA_KEY=k")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("docker-compose config: %v\n%s", err, out)
		}
	}
}
