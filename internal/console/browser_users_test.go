package console

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserUsersButtonsFit: on the users page every action button of
// the accounts table shows whole inside its card, at 1280, 1440 and 1920
// px and on a 400 px phone, and the page does not scroll sideways.
func TestBrowserUsersButtonsFit(t *testing.T) {
	e := newEnv(t)
	e.user("ada", true)
	for i := range 3 {
		e.user(fmt.Sprintf("user-with-a-longer-name-%d", i), false)
	}
	browser := startBrowser(t)
	ada := newTab(t, browser, e.srv.URL)
	ada.signIn("ada")
	for _, width := range []int64{1280, 1440, 1920, 400} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			ada.t = t
			ada.run("viewport", chromedp.EmulateViewport(width, 900))
			ada.open("/users")
			clipped, err := chromedp.Run(ada.ctx, chromedp.Evaluate[[]string](`(function(){
				var card = document.querySelector("section[aria-labelledby=users-h]").getBoundingClientRect(), out = [];
				document.querySelectorAll("section[aria-labelledby=users-h] button, section[aria-labelledby=users-h] summary").forEach(function(b){
					var r = b.getBoundingClientRect();
					if (r.width === 0) { return; }
					if (r.left < card.left - 0.5 || r.right > card.right + 0.5 || r.right > window.innerWidth) {
						out.push(b.textContent.trim() + " " + Math.round(r.left) + ".." + Math.round(r.right));
					}
				});
				document.querySelectorAll("section[aria-labelledby=users-h] .table-wrap").forEach(function(w){
					if (w.scrollWidth > w.clientWidth + 1) { out.push("the table scrolls: " + w.scrollWidth + " > " + w.clientWidth); }
				});
				return out;
			})()`))
			if err != nil {
				t.Fatal(err)
			}
			if len(clipped) > 0 {
				ada.shot(t, "failed")
				t.Fatalf("buttons outside the accounts card at %d px: %v", width, clipped)
			}
			if n := ada.count("section[aria-labelledby=users-h] button"); n < 6 {
				t.Fatalf("%d buttons in the accounts table, want the actions of 3 users", n)
			}
			noSidewaysScroll(ada, width)
			ada.shot(t, fmt.Sprintf("users-%d", width))
		})
	}
	ada.run("reset viewport", chromedp.ResetViewport())
}
