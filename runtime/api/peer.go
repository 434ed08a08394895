package api

import (
	"context"
	"fmt"
	"net"
	"os/user"
	"strconv"
	"syscall"
)

type ctxKey int

const ownerKey ctxKey = 0

// peerOwner reads the OS user of the process at the other end of a Unix
// socket connection from the kernel (SO_PEERCRED).
func peerOwner(c net.Conn) (string, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return "", fmt.Errorf("not a unix socket connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return "", err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return "", err
	}
	if credErr != nil {
		return "", credErr
	}
	uid := strconv.FormatUint(uint64(cred.Uid), 10)
	if u, err := user.LookupId(uid); err == nil {
		return u.Username, nil
	}
	return "uid:" + uid, nil
}

// ConnContext stores the connection's owner in the context of every request
// on it. Use it as http.Server.ConnContext.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	owner, err := peerOwner(c)
	if err != nil {
		return ctx // no owner: every request on this connection is refused
	}
	return context.WithValue(ctx, ownerKey, owner)
}

func ownerFrom(ctx context.Context) string {
	s, _ := ctx.Value(ownerKey).(string)
	return s
}
