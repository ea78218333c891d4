package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
)

// healthcheckCmd is `lectern healthcheck`: for a container's health check,
// where the image has no shell or curl. It exits 0 when the server on PORT
// (or --url) answers GET /readyz with 200.
func healthcheckCmd() *cobra.Command {
	var target string
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 when the local server is ready (GET /readyz answers 200), else 1",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if target == "" {
				port := os.Getenv("PORT")
				if port == "" {
					port = "8080"
				}
				target = "http://127.0.0.1:" + port + "/readyz"
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
			if err != nil {
				return err
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("not ready: %w", err)
			}
			_ = res.Body.Close()
			if res.StatusCode != http.StatusOK {
				return fmt.Errorf("not ready: %s answered %d", target, res.StatusCode)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&target, "url", "", "the readiness URL (default http://127.0.0.1:$PORT/readyz)")
	return cmd
}
