package ctlsock

// The client side: one request to a running daemon (`netfwd ctl`, the lab,
// the tests).

import (
	"encoding/json"
	"fmt"
	"net"
	"time"
)

// Do sends lines to the daemon at socket and returns its output. A refused
// request is a *RequestError; anything else is a connection problem.
func Do(socket string, lines []string, asJSON bool) (string, error) {
	c, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := json.NewEncoder(c).Encode(Request{Lines: lines, JSON: asJSON}); err != nil {
		return "", err
	}
	if uc, ok := c.(*net.UnixConn); ok {
		uc.CloseWrite()
	}
	var resp Response
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		return "", fmt.Errorf("reading the daemon's answer: %w", err)
	}
	if !resp.OK {
		if len(resp.Errors) == 0 {
			resp.Errors = []string{"ctl: request failed"}
		}
		return resp.Output, &RequestError{Errors: resp.Errors, Output: resp.Output}
	}
	return resp.Output, nil
}
