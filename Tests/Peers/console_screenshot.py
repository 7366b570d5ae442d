"""Saves a screenshot of mailboxd's console: headless Chromium signs in with the console token and waits for the
page to go live. Used by Scripts/demo (in the test venv, .venv, which has selenium).

Usage: console_screenshot.py --url https://127.0.0.1:PORT/console --token-file F --out PNG
Chromium does not check the dev certificate here (a picture, not a test: the tests trust the dev CA).
"""
import argparse
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--token-file", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1100",
                 "--ignore-certificate-errors", "--no-first-run"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.get(args.url)
        driver.find_element(By.ID, "token").send_keys(open(args.token_file).read().strip())
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                if driver.find_element(By.ID, "status").get_attribute("data-state") == "live":
                    break
            except Exception:  # the page is still loading
                pass
            time.sleep(0.1)
        else:
            print("console-screenshot: the console never went live", file=sys.stderr)
            return 1
        time.sleep(0.5)
        driver.save_screenshot(args.out)
        return 0
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main())
