package api

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeUserScramCredentials answers DescribeUserScramCredentials (key 50) from the image: each
// named user's mechanisms and iterations (never a secret), every user with credentials for a null
// or empty list. An unknown user gets RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE.
func (b *Broker) describeUserScramCredentials(req *kmsg.DescribeUserSCRAMCredentialsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	img := b.meta.Image()
	var users []string
	if len(req.Users) == 0 {
		for u := range img.ScramCredentials {
			users = append(users, u)
		}
		slices.Sort(users)
	} else {
		for _, u := range req.Users {
			users = append(users, u.Name)
		}
	}
	count := map[string]int{}
	for _, u := range users {
		count[u]++
	}
	for _, u := range users {
		if count[u] == 0 {
			continue // a duplicate already answered
		}
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = u
		creds := img.ScramCredentials[u]
		switch {
		case count[u] > 1:
			r.ErrorCode = kerr.DuplicateResource.Code
			r.ErrorMessage = errorMessage(fmt.Errorf("user %q named more than once", u))
		case len(creds) == 0:
			r.ErrorCode = kerr.ResourceNotFound.Code
			r.ErrorMessage = errorMessage(fmt.Errorf("user %q has no SCRAM credential", u))
		}
		count[u] = 0
		for _, m := range []int8{1, 2} {
			if c, ok := creds[m]; ok && r.ErrorCode == 0 {
				info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				info.Mechanism, info.Iterations = m, c.Iterations
				r.CredentialInfos = append(r.CredentialInfos, info)
			}
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}
