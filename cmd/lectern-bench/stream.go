package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"lectern/pgtest"
)

// Streamed turns: the fake providers' pace.
const (
	streamFirstToken = 50 * time.Millisecond
	streamAnswer     = 500 * time.Millisecond
	streamPieces     = 10
	streamTurns      = 30
)

// streamingProvider is an OpenAI-compatible server that streams an answer
// of streamPieces pieces: the first after streamFirstToken, the last at
// streamAnswer.
func streamingProvider() (url string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	gap := (streamAnswer - streamFirstToken) / (streamPieces - 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		start := time.Now()
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range streamPieces {
			// Each piece at its own time from the start, so that the
			// writes' own cost does not add up.
			time.Sleep(time.Until(start.Add(streamFirstToken + time.Duration(i)*gap)))
			finish := "null"
			if i == streamPieces-1 {
				finish = `"stop"`
			}
			_, _ = fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","+
				"\"choices\":[{\"index\":0,\"delta\":{\"content\":\"word%d \"},\"finish_reason\":%s}]}\n\n", i, finish)
			_ = rc.Flush()
		}
		_, _ = io.WriteString(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],"+
			"\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":10,\"total_tokens\":20}}\n\ndata: [DONE]\n\n")
	})}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String() + "/v1", func() { _ = srv.Close() }, nil
}

// sseTimes reads a text/event-stream body: when the first delta came, when
// the turn came, and the models' own latencies (their done events).
func sseTimes(start time.Time, body io.Reader) (firstDelta, turn time.Duration, latencies []time.Duration, err error) {
	r := bufio.NewReader(body)
	event := ""
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return 0, 0, nil, fmt.Errorf("the stream ended before its turn: %w", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
			if event == "delta" && firstDelta == 0 {
				firstDelta = time.Since(start)
			}
		case strings.HasPrefix(line, "data: ") && event == "done":
			var d struct {
				LatencyMS int64 `json:"latency_ms"`
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				return 0, 0, nil, err
			}
			latencies = append(latencies, time.Duration(d.LatencyMS)*time.Millisecond)
		case strings.HasPrefix(line, "data: ") && event == "error":
			return 0, 0, nil, fmt.Errorf("error event: %s", line)
		case strings.HasPrefix(line, "data: ") && event == "turn":
			return firstDelta, time.Since(start), latencies, nil
		}
	}
}

// streamBench measures a streamed two-model turn against fake providers
// whose first token comes after 50 ms and whose answers end at 500 ms: the
// time to its first delta beside the providers' first token, and the time
// to its turn event beside its slowest model, in the same run.
func streamBench(ctx context.Context, base string) error {
	pool, dbName, err := pgtest.NewDatabase(ctx, base)
	if err != nil {
		return err
	}
	defer pool.Close()
	providerURL, stopProvider, err := streamingProvider()
	if err != nil {
		return err
	}
	defer stopProvider()
	env, err := newPracticeEnv(ctx, base, dbName, providerURL, "stream", 8)
	if err != nil {
		return err
	}
	defer env.close()
	srv, client, token, class := env.srv, env.client, env.token, env.class

	// Baseline: one stream straight from the fake provider, first token and whole.
	var directFirst, directWhole []time.Duration
	for range 20 {
		start := time.Now()
		resp, err := client.Post(providerURL+"/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[],"stream":true}`))
		if err != nil {
			return err
		}
		r := bufio.NewReader(resp.Body)
		if _, err := r.ReadString('\n'); err != nil {
			resp.Body.Close()
			return err
		}
		directFirst = append(directFirst, time.Since(start))
		_, _ = io.Copy(io.Discard, r)
		resp.Body.Close()
		directWhole = append(directWhole, time.Since(start))
	}

	runURL := fmt.Sprintf("%s/user/practice/sessions/run?class_id=%d", srv.url, class.ID)
	var firsts, totals, slowest, overFirst, overSlowest []time.Duration
	for i := range streamTurns + 3 {
		req, _ := http.NewRequest("POST", runURL, strings.NewReader(fmt.Sprintf(`{"prompt_text":"Question %d","model_names":["stream-a","stream-b"]}`, i)))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusCreated {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return fmt.Errorf("streamed run: %d %s", resp.StatusCode, body)
		}
		first, total, latencies, err := sseTimes(start, resp.Body)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if i < 3 { // warm-up
			continue
		}
		var slow time.Duration
		for _, l := range latencies {
			slow = max(slow, l)
		}
		firsts, totals, slowest = append(firsts, first), append(totals, total), append(slowest, slow)
		overFirst = append(overFirst, first-streamFirstToken)
		overSlowest = append(overSlowest, total-slow)
	}
	for _, d := range [][]time.Duration{directFirst, directWhole, firsts, totals, slowest, overFirst, overSlowest} {
		sortDurations(d)
	}
	fmt.Printf("\n## Streamed two-model turn (fake providers: first token at %s, answer at %s), %d sequential turns\n",
		streamFirstToken, streamAnswer, streamTurns)
	fmt.Printf("%-40s %10s %10s\n", "", "p50", "p99")
	fmt.Printf("%-40s %10s %10s   (first token + < 5 ms: %.2f× of %s at p50)\n", "first delta (Accept: text/event-stream)",
		ms(percentile(firsts, .5)), ms(percentile(firsts, .99)), float64(percentile(firsts, .5))/float64(streamFirstToken), streamFirstToken)
	fmt.Printf("%-40s %10s %10s   (target < 5 ms)\n", "  first delta − first token", ms(percentile(overFirst, .5)), ms(percentile(overFirst, .99)))
	fmt.Printf("%-40s %10s %10s   (baseline: one stream straight from the provider)\n", "provider's first token, direct", ms(percentile(directFirst, .5)), ms(percentile(directFirst, .99)))
	fmt.Printf("%-40s %10s %10s   (%.2f× the slowest model at p50)\n", "turn event (recorded, read models applied)",
		ms(percentile(totals, .5)), ms(percentile(totals, .99)), float64(percentile(totals, .5))/float64(percentile(slowest, .5)))
	fmt.Printf("%-40s %10s %10s   (target < 10 ms)\n", "  turn − its slowest model", ms(percentile(overSlowest, .5)), ms(percentile(overSlowest, .99)))
	fmt.Printf("%-40s %10s %10s   (the done events' latency_ms, same turns)\n", "slowest model of the turn", ms(percentile(slowest, .5)), ms(percentile(slowest, .99)))
	fmt.Printf("%-40s %10s %10s   (baseline: one stream straight from the provider)\n", "provider's whole answer, direct", ms(percentile(directWhole, .5)), ms(percentile(directWhole, .99)))
	return nil
}
