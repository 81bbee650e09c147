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
// request is a *RequestError; anything else is a connection problem. A
// query answered with a failure (an unreachable `route get`) is no error
// here: DoStatus gives its status.
func Do(socket string, lines []string, asJSON bool) (string, error) {
	out, _, err := DoStatus(socket, lines, asJSON)
	return out, err
}

// DoStatus is Do with the exit status of the request's queries (0, or
// non-zero when one was answered with a failure: Response.Status).
func DoStatus(socket string, lines []string, asJSON bool) (string, int, error) {
	out, resp, err := do(socket, lines, asJSON)
	return out, resp.Status, err
}

func do(socket string, lines []string, asJSON bool) (string, Response, error) {
	var resp Response
	c, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return "", resp, err
	}
	defer c.Close()
	if err := json.NewEncoder(c).Encode(Request{Lines: lines, JSON: asJSON}); err != nil {
		return "", resp, err
	}
	if uc, ok := c.(*net.UnixConn); ok {
		uc.CloseWrite()
	}
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		return "", resp, fmt.Errorf("reading the daemon's answer: %w", err)
	}
	if !resp.OK {
		if len(resp.Errors) == 0 {
			resp.Errors = []string{"ctl: request failed"}
		}
		return resp.Output, resp, &RequestError{Errors: resp.Errors, Output: resp.Output}
	}
	return resp.Output, resp, nil
}
